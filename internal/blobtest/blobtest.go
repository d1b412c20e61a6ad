// Package blobtest gives tests a container of their own on the test
// Azure Blob Storage API server (Azurite; see testenv.Azurite).
package blobtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

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
	return Container{Name: name, query: q}
}

// Container is a test's container on Azurite.
type Container struct {
	Name  string
	query url.Values
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
	return (&url.URL{Scheme: "azblob", Host: c.Name, RawQuery: q.Encode()}).String()
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
	return Container{Name: c.Name, query: q}
}
