package redact

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	cases := []struct {
		name, in string
		secrets  []string
		gone     []string
		kept     []string
	}{
		{"url password", `dial postgres://weir:s3cret-pw@db:5432/x failed`, nil, []string{"s3cret-pw"}, []string{"postgres://weir:", "@db:5432/x"}},
		{"header echoed", "upstream said: Authorization: Bearer sk-live-123456\nbad request", nil, []string{"sk-live-123456"}, []string{"bad request", "Authorization: "}},
		{"json echoed", `{"error":"bad","headers":{"authorization":"Bearer sk-abc123456"}}`, nil, []string{"sk-abc123456"}, []string{`"error":"bad"`}},
		{"api key header", `X-Api-Key: k-99887766`, nil, []string{"k-99887766"}, nil},
		{"bare bearer", `token Bearer abc.def.ghi was refused`, nil, []string{"abc.def.ghi"}, []string{"was refused"}},
		{"named secret", `the key sk-named-42 leaked in a body`, []string{"sk-named-42"}, []string{"sk-named-42"}, []string{"leaked in a body"}},
		{"http.Header as JSON", `{"headers":{"Authorization":["Bearer sk-json-778899"],"X-Api-Key":["k-json-112233"],"Accept":["*/*"]}}`, nil, []string{"sk-json-778899", "k-json-112233"}, []string{`"Accept":["*/*"]`}},
		{"http.Header printed by Go", `map[Api-Key:[azk-go-445566] Authorization:[Bearer sk-go-990011] Accept:[*/*]]`, nil, []string{"azk-go-445566", "sk-go-990011"}, []string{"Accept:[*/*]"}},
		{"short secret ignored", `a b c`, []string{"a"}, nil, []string{"a b c"}},
		{"nothing to hide", `plain error`, nil, nil, []string{"plain error"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := String(c.in, c.secrets...)
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("String(%q) = %q: still holds %q", c.in, got, g)
				}
			}
			for _, k := range c.kept {
				if !strings.Contains(got, k) {
					t.Errorf("String(%q) = %q: lost %q", c.in, got, k)
				}
			}
		})
	}
}

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://user:pw@collector:4318/v1": "http://user:" + Mask + "@collector:4318/v1",
		"http://collector:4318":            "http://collector:4318",
		"http://user@collector":            "http://user@collector",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	err := Error(errors.Join(cause, errors.New("Authorization: Bearer tok-123456")))
	if strings.Contains(err.Error(), "tok-123456") {
		t.Fatalf("Error() = %q still holds the token", err)
	}
	if !errors.Is(err, fs.ErrNotExist) || !Is(err) {
		t.Fatalf("redacted error lost its chain: %v", err)
	}
	plain := errors.New("nothing secret")
	if Error(plain) != plain {
		t.Fatal("an error with nothing to redact was wrapped")
	}
	if Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
}

// Credentials gives the secrets of a request, so that they are removed in
// any form an upstream echoes them, even one no pattern knows.
func TestCredentials(t *testing.T) {
	h := http.Header{}
	h.Set("Authorization", "Bearer sk-cred-123456")
	h.Set("Api-Key", "azk-cred-654321")
	h.Set("Cookie", "session=sess-cred-777; theme=dark")
	h.Set("Accept", "application/json")
	u, _ := url.Parse("https://weir:pw-cred-42@api.example/v1")
	got := Credentials(h, u)
	for _, want := range []string{"Bearer sk-cred-123456", "sk-cred-123456", "azk-cred-654321", "sess-cred-777", "pw-cred-42"} {
		if !slices.Contains(got, want) {
			t.Errorf("Credentials = %q, lacks %q", got, want)
		}
	}
	if slices.Contains(got, "application/json") {
		t.Errorf("Credentials = %q holds a header that is not a credential", got)
	}
	echo := "received key=sk-cred-123456 (azk-cred-654321), cookie sess-cred-777, user pw-cred-42"
	clean := String(echo, got...)
	for _, s := range []string{"sk-cred-123456", "azk-cred-654321", "sess-cred-777", "pw-cred-42"} {
		if strings.Contains(clean, s) {
			t.Errorf("String(%q) = %q still holds %q", echo, clean, s)
		}
	}
	if Credentials(nil, nil) != nil {
		t.Error("Credentials(nil, nil) is not empty")
	}
}
