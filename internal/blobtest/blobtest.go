// Package blobtest gives tests a container of their own on the test
// Azure Blob Storage API server (Azurite; see testenv.Azurite), or a
// bucket on the test S3 API server (s3rver; see testenv.S3).
package blobtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/weirhq/weir/internal/testenv"
)

// Azure makes a container of the test's own on Azurite, deleted at its
// end, and returns its azblob:// URL with the query that reaches Azurite;
// Prefix adds a folder to it. It skips the test (fails it under
// WEIR_REQUIRE_SERVICES=1) without Azurite.
func Azure(t testing.TB) Container {
	t.Helper()
	endpoint := testenv.Azurite(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	account := strings.Trim(u.Path, "/")
	name := ContainerName(t)
	cred, err := azblob.NewSharedKeyCredential(account, testenv.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential(endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CreateContainer(ctx, name, nil); err != nil {
		t.Fatalf("create the container %s on %s: %v", name, endpoint, err)
	}
	t.Cleanup(func() {
		if _, err := client.DeleteContainer(context.Background(), name, nil); err != nil {
			t.Logf("delete the container %s: %v", name, err)
		}
	})
	q := url.Values{"protocol": {u.Scheme}, "domain": {u.Host}, "localemu": {"true"}, "storage_account": {account}}
	return Container{Name: name, scheme: "azblob", query: q}
}

// S3 makes a bucket of the test's own on the test S3 API server (see
// testenv.S3), deleted at its end with what it holds, and returns it.
func S3(t testing.TB) Container {
	t.Helper()
	endpoint := testenv.S3(t)
	name := ContainerName(t)
	client := s3.New(s3.Options{BaseEndpoint: &endpoint, Region: "us-east-1", UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}, nil
		})})
	ctx := context.Background()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create the bucket %s on %s: %v", name, endpoint, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &name})
		if err == nil {
			for _, o := range out.Contents {
				_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &name, Key: o.Key})
			}
		}
		if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &name}); err != nil {
			t.Logf("delete the bucket %s: %v", name, err)
		}
	})
	q := url.Values{"endpoint": {endpoint}, "region": {"us-east-1"}, "use_path_style": {"true"}}
	return Container{Name: name, scheme: "s3", query: q}
}

// Container is a test's container on Azurite, or bucket on the S3 API
// server.
type Container struct {
	Name   string
	scheme string
	query  url.Values
}

// URL is the container's azblob:// URL.
func (c Container) URL() string { return c.Prefix("") }

// Prefix is the azblob:// URL of the folder prefix of the container.
func (c Container) Prefix(prefix string) string {
	q := url.Values{}
	for k, v := range c.query {
		q[k] = v
	}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	return (&url.URL{Scheme: c.scheme, Host: c.Name, RawQuery: q.Encode()}).String()
}

var notName = regexp.MustCompile(`[^a-z0-9]+`)

// ContainerName is a name of a container for t, of its own: the test's
// name in the letters Azure takes, and a random suffix.
func ContainerName(t testing.TB) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	base := strings.Trim(notName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	return "t-" + base + "-" + hex.EncodeToString(r[:])
}

// Via is the container reached through the address hostport (a proxy of
// the test's) instead of Azurite's own.
func (c Container) Via(hostport string) Container {
	q := url.Values{}
	for k, v := range c.query {
		q[k] = v
	}
	q.Set("domain", hostport)
	return Container{Name: c.Name, scheme: c.scheme, query: q}
}
