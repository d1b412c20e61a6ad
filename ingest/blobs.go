package ingest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/weirhq/weir/ingest/blob"
	"github.com/weirhq/weir/ingest/pipeline"
)

// openBlobs opens the containers of Config.IncomingURL, ProcessedURL and
// FailedURL, the data directory's folder for one left empty, and adds
// their breaker to the service's; nil when all three are empty.
func (s *Service) openBlobs(ctx context.Context) (*pipeline.Blobs, error) {
	cfg := s.cfg
	if cfg.IncomingURL == "" && cfg.ProcessedURL == "" && cfg.FailedURL == "" {
		return nil, nil
	}
	br, err := blob.NewBreaker()
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	s.breakers = append(s.breakers, br)
	var out pipeline.Blobs
	for _, c := range []struct {
		setting, url, dir string
		b                 **blob.Bucket
	}{
		{"Config.IncomingURL", cfg.IncomingURL, pipeline.IncomingDir, &out.Incoming},
		{"Config.ProcessedURL", cfg.ProcessedURL, pipeline.ProcessedDir, &out.Processed},
		{"Config.FailedURL", cfg.FailedURL, pipeline.FailedDir, &out.Failed},
	} {
		u := c.url
		if u == "" {
			dir, err := filepath.Abs(filepath.Join(cfg.DataDir, c.dir))
			if err != nil {
				return nil, fmt.Errorf("ingest: %w", err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("ingest: %w", err)
			}
			u = (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
		}
		b, err := blob.Open(ctx, c.setting, u, br)
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		s.closers = append(s.closers, func() { b.Close() })
		*c.b = b
	}
	return &out, nil
}

// checkBlobs returns an error naming the first of the containers' URLs
// whose scheme is not one blob opens, or the URLs beside Pipeline.Blobs.
func (c Config) checkBlobs() error {
	urls := []struct{ setting, url string }{
		{"Config.IncomingURL", c.IncomingURL}, {"Config.ProcessedURL", c.ProcessedURL}, {"Config.FailedURL", c.FailedURL},
	}
	for _, u := range urls {
		if u.url == "" {
			continue
		}
		if c.Pipeline.Blobs != nil {
			return fmt.Errorf("ingest: %s and Config.Pipeline.Blobs are both set: choose one", u.setting)
		}
		if err := blob.CheckURL(u.url); err != nil {
			return fmt.Errorf("ingest: %w", &blob.SettingError{Setting: u.setting, Err: err})
		}
	}
	return nil
}
