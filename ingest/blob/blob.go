// Package blob is the ingestion service's access to object storage: a
// container of blobs named by a URL (file://, azblob://, s3://, gs://,
// through gocloud.dev/blob), with what the service needs of it: a
// listing, attributes with the store's ETag, reads of one version, and
// moves that copy then delete only the version copied, so that a blob
// overwritten meanwhile stays where it is.
//
// Every call goes through a circuit breaker shared by the service's
// containers: when the store is down the calls fail fast with an
// *UnavailableError, which the caller retries later.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	gblob "gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/fileblob"  // file://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
	"gocloud.dev/gcerrors"

	"github.com/weirhq/weir/resilience/breaker"
)

// Schemes are the URL schemes Open takes.
var Schemes = []string{"file", "azblob", "s3", "gs"}

// ErrChanged: the blob is no longer the version asked for (its ETag
// differs).
var ErrChanged = errors.New("blob: the blob changed (its ETag differs)")

// UnavailableError is a failure of the store itself (unreachable,
// refusing, or behind an open breaker), which a later try may not meet.
type UnavailableError struct {
	// Bucket is the container's URL, without its query.
	Bucket string
	// RetryIn, when the breaker is open, is how long until it lets a
	// call through.
	RetryIn time.Duration
	Err     error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("blob store %s unavailable: %v", e.Bucket, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Attrs is what the store says of a blob.
type Attrs struct {
	Key     string
	Size    int64
	ModTime time.Time
	// ETag is the store's ETag of the blob's version; empty in a listing.
	ETag string
	// Meta is the blob's metadata; keys are lower case.
	Meta map[string]string
	// ContentType is the blob's MIME type; empty in a listing.
	ContentType string
}

// Bucket is one container of blobs, or a folder of one (the URL's prefix
// parameter).
type Bucket struct {
	name string // the URL without its query, for messages
	b    *gblob.Bucket
	br   *breaker.Breaker
}

// NewBreaker is a breaker for the buckets of one service: it opens after
// 5 failures within 30 s and lets a probe through 10 s later.
func NewBreaker() (*breaker.Breaker, error) {
	return breaker.New(breaker.Config{Name: "blob", Strategy: breaker.CountInWindow(5, 30*time.Second), OpenDelay: 10 * time.Second,
		Classify: func(ctx context.Context, err error) breaker.Outcome {
			switch gcerrors.Code(err) {
			case gcerrors.OK, gcerrors.NotFound, gcerrors.FailedPrecondition, gcerrors.AlreadyExists, gcerrors.InvalidArgument:
				return breaker.Success // the store answered
			}
			return breaker.DefaultClassify(ctx, err)
		}})
}

// SettingError is a container's URL refused by Open, with the setting
// it came from.
type SettingError struct {
	// Setting names where the URL came from ("Config.IncomingURL").
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// CheckURL returns an error unless rawURL is a URL of one of Schemes.
func CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	for _, s := range Schemes {
		if u.Scheme == s {
			return nil
		}
	}
	return fmt.Errorf("%q: unknown scheme %q; want one of %s://", nameOf(u), u.Scheme, strings.Join(Schemes, "://, "))
}

// nameOf is u without its query (which may hold a token), for messages.
func nameOf(u *url.URL) string {
	name := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	if p := strings.Trim(u.Query().Get("prefix"), "/"); p != "" {
		name += "/" + p
	}
	return name
}

// Open opens the container at rawURL and checks that it is there and
// readable; its errors are *SettingError, naming setting: an unknown
// scheme, a container that does not exist, or missing or refused
// credentials. br is the breaker of the service's buckets (NewBreaker).
func Open(ctx context.Context, setting, rawURL string, br *breaker.Breaker) (*Bucket, error) {
	if err := CheckURL(rawURL); err != nil {
		return nil, &SettingError{setting, err}
	}
	u, _ := url.Parse(rawURL)
	name := nameOf(u)
	b, err := gblob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, &SettingError{setting, fmt.Errorf("open %s: %w%s", name, err, credentialsHint(u.Scheme, err))}
	}
	ok, err := b.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("the container does not exist: create it first")
	}
	if err != nil {
		b.Close()
		return nil, &SettingError{setting, fmt.Errorf("%s: %w%s", name, err, credentialsHint(u.Scheme, err))}
	}
	return &Bucket{name: name, b: b, br: br}, nil
}

// credentialsHint says where a scheme's credentials come from, after an
// error that may be for want of them.
func credentialsHint(scheme string, err error) string {
	if c := gcerrors.Code(err); c != gcerrors.PermissionDenied && c != gcerrors.Unknown {
		return ""
	}
	switch scheme {
	case "azblob":
		return " (credentials: AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN, or AZURE_STORAGE_CONNECTION_STRING)"
	case "s3":
		return " (credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the AWS shared configuration)"
	case "gs":
		return " (credentials: GOOGLE_APPLICATION_CREDENTIALS or the instance's default)"
	}
	return ""
}

// String is the bucket's URL without its query.
func (b *Bucket) String() string { return b.name }

// Close closes the bucket.
func (b *Bucket) Close() error { return b.b.Close() }

// do runs fn through the breaker; the store's failures come back as
// *UnavailableError, a missing blob as fs.ErrNotExist, and a failed
// condition as ErrChanged.
func (b *Bucket) do(ctx context.Context, key string, fn func(context.Context) error) error {
	err := b.br.Do(ctx, fn)
	if err == nil {
		return nil
	}
	var open *breaker.OpenError
	switch {
	case errors.As(err, &open):
		return &UnavailableError{Bucket: b.name, RetryIn: open.RetryIn, Err: err}
	case ctx.Err() != nil:
		return err
	case errors.Is(err, ErrChanged):
		return fmt.Errorf("%s/%s: %w", b.name, key, ErrChanged)
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return fmt.Errorf("%s/%s: %w", b.name, key, fs.ErrNotExist)
	case gcerrors.FailedPrecondition:
		return fmt.Errorf("%s/%s: %w", b.name, key, ErrChanged)
	case gcerrors.InvalidArgument:
		return err
	}
	return &UnavailableError{Bucket: b.name, Err: err}
}

// List calls fn with each blob of the bucket, in key order, with no ETag.
func (b *Bucket) List(ctx context.Context, fn func(Attrs) error) error {
	var token = gblob.FirstPageToken
	for {
		var page []*gblob.ListObject
		err := b.do(ctx, "", func(ctx context.Context) error {
			var err error
			page, token, err = b.b.ListPage(ctx, token, 1000, nil)
			return err
		})
		if err != nil {
			return err
		}
		for _, o := range page {
			if o.IsDir {
				continue
			}
			if err := fn(Attrs{Key: o.Key, Size: o.Size, ModTime: o.ModTime}); err != nil {
				return err
			}
		}
		if len(token) == 0 {
			return nil
		}
	}
}

// Attributes is what the store says of the blob at key.
func (b *Bucket) Attributes(ctx context.Context, key string) (Attrs, error) {
	var a *gblob.Attributes
	err := b.do(ctx, key, func(ctx context.Context) error {
		var err error
		a, err = b.b.Attributes(ctx, key)
		return err
	})
	if err != nil {
		return Attrs{}, err
	}
	return Attrs{Key: key, Size: a.Size, ModTime: a.ModTime, ETag: a.ETag, Meta: a.Metadata, ContentType: a.ContentType}, nil
}

// Reader reads one version of a blob.
type Reader struct {
	r      *gblob.Reader
	b      *Bucket
	key    string
	etag   string
	atomic bool // the store refuses the read of another version itself
}

func (r *Reader) Read(p []byte) (int, error) { return r.r.Read(p) }

// Close closes the reader.
func (r *Reader) Close() error { return r.r.Close() }

// Size is the blob's size.
func (r *Reader) Size() int64 { return r.r.Size() }

// ModTime is when the blob was last written.
func (r *Reader) ModTime() time.Time { return r.r.ModTime() }

// Check, once the blob has been read, says whether what was read is the
// version asked for: nil, ErrChanged, or the error of the check.
func (r *Reader) Check(ctx context.Context) error {
	if r.atomic || r.etag == "" {
		return nil
	}
	a, err := r.b.Attributes(ctx, r.key)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrChanged
	}
	if err != nil {
		return err
	}
	if a.ETag != r.etag {
		return ErrChanged
	}
	return nil
}

// NewReader opens the blob at key for reading; with etag set, only the
// version of that ETag (ErrChanged otherwise; see Reader.Check for the
// stores that cannot refuse it themselves).
func (b *Bucket) NewReader(ctx context.Context, key, etag string) (*Reader, error) {
	if err := b.checkETag(ctx, key, etag); err != nil {
		return nil, err
	}
	return b.newReader(ctx, key, etag)
}

// checkETag returns an error wrapping ErrChanged when key's ETag is no
// longer etag. An empty etag is no condition.
func (b *Bucket) checkETag(ctx context.Context, key, etag string) error {
	if etag == "" {
		return nil
	}
	a, err := b.Attributes(ctx, key)
	if err != nil {
		return err
	}
	if a.ETag != etag {
		return fmt.Errorf("%s/%s: %w", b.name, key, ErrChanged)
	}
	return nil
}

// azureIfMatch is the Azure condition that the blob still has the ETag
// etag.
func azureIfMatch(etag string) *azblobblob.AccessConditions {
	e := azcore.ETag(etag)
	return &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &e}}
}

// newReader is NewReader without the check of the ETag before the read.
func (b *Bucket) newReader(ctx context.Context, key, etag string) (*Reader, error) {
	out := &Reader{b: b, key: key, etag: etag}
	var opts *gblob.ReaderOptions
	if etag != "" {
		opts = &gblob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			var az *azblobblob.DownloadStreamOptions
			var s3in *s3.GetObjectInput
			switch {
			case as(&az):
				az.AccessConditions = azureIfMatch(etag)
				out.atomic = true
			case as(&s3in):
				s3in.IfMatch = &etag
				out.atomic = true
			}
			return nil
		}}
	}
	err := b.do(ctx, key, func(ctx context.Context) error {
		var err error
		out.r, err = b.b.NewReader(ctx, key, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WriteAll writes data to key, with the metadata meta, replacing what is
// there: the blob appears whole or not at all.
func (b *Bucket) WriteAll(ctx context.Context, key string, data []byte, meta map[string]string) error {
	return b.do(ctx, key, func(ctx context.Context) error {
		return b.b.WriteAll(ctx, key, data, &gblob.WriterOptions{Metadata: meta})
	})
}

// Upload writes what r holds to key, as WriteAll, with the MIME type
// contentType (default application/octet-stream).
func (b *Bucket) Upload(ctx context.Context, key string, r io.Reader, contentType string, meta map[string]string) error {
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	return b.do(ctx, key, func(ctx context.Context) error {
		return b.b.Upload(ctx, key, r, &gblob.WriterOptions{ContentType: contentType, Metadata: meta})
	})
}

// Delete deletes the blob at key; with etag set, only the version of
// that ETag (ErrChanged otherwise): it checks the ETag just before, and
// Azure Blob Storage and S3 check it again in the delete itself (a server
// that ignores the condition leaves the window between the two).
func (b *Bucket) Delete(ctx context.Context, key, etag string) error {
	if err := b.checkETag(ctx, key, etag); err != nil {
		return err
	}
	opts := &gblob.DeleteOptions{}
	if etag != "" {
		opts.BeforeDelete = func(as func(any) bool) error {
			var az *azblobblob.DeleteOptions
			var s3in *s3.DeleteObjectInput
			switch {
			case as(&az):
				az.AccessConditions = azureIfMatch(etag)
			case as(&s3in):
				s3in.IfMatch = &etag
			}
			return nil
		}
	}
	return b.do(ctx, key, func(ctx context.Context) error {
		return b.b.DeleteWithOptions(ctx, key, opts)
	})
}

// DeletePrefix deletes every blob whose key starts with prefix.
func (b *Bucket) DeletePrefix(ctx context.Context, prefix string) error {
	var keys []string
	err := b.do(ctx, prefix, func(ctx context.Context) error {
		keys = keys[:0]
		it := b.b.List(&gblob.ListOptions{Prefix: prefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if !o.IsDir {
				keys = append(keys, o.Key)
			}
		}
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := b.Delete(ctx, k, ""); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// ETagMeta is the metadata key under which Move records, on the copy, the
// ETag of the version it copied.
const ETagMeta = "weir_source_etag"

// Move moves the blob at srcKey of src to dstKey of dst if it is the
// version etag ("" for any): it copies that version, then deletes it,
// only if it is still that version. It reports whether it moved it: a
// blob that is missing, or that is another version (overwritten before
// the copy, or between the copy and the delete), stays where it is,
// and the copy of an older version it may have made is left in dst. The
// copy records the ETag of the version it copied in its metadata, under
// ETagMeta.
func Move(ctx context.Context, src *Bucket, srcKey string, dst *Bucket, dstKey, etag string) (bool, error) {
	a, err := src.Attributes(ctx, srcKey)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case etag != "" && a.ETag != etag:
		return false, nil
	}
	copied := a.ETag
	r, err := src.newReader(ctx, srcKey, copied)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrChanged) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The copy keeps the metadata, and the ETag of the first version
	// moved (a blob moved on from failed/ keeps its incoming/ ETag).
	meta := map[string]string{ETagMeta: copied}
	for k, v := range a.Meta {
		meta[k] = v
	}
	err = dst.Upload(ctx, dstKey, r, a.ContentType, meta)
	r.Close()
	if err == nil {
		err = r.Check(ctx)
	}
	if errors.Is(err, ErrChanged) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = src.Delete(ctx, srcKey, copied)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrChanged) {
		// Overwritten (or moved by another process) since the copy: the
		// newer version stays, for the scan.
		return false, nil
	}
	return err == nil, err
}

// Display is rawURL for people and logs: without its query (which may
// hold a token), with its prefix as a folder.
func Display(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return nameOf(u)
}
