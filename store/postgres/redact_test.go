package postgres

import (
	"net/url"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, conn, msg, want string
	}{
		{"url", "postgres://u:pw1234@h/db", "cannot parse `postgres://u:pw1234@h/db`: x", "cannot parse `postgres://u:xxxxx@h/db`: x"},
		{"url with @ in password", "postgres://u:p@ss@h:bad/db", `parse "postgres://u:p@ss@h:bad/db": invalid port`, `parse "postgres://u:xxxxx@h:bad/db": invalid port`},
		{"percent-encoded", "postgres://u:p%2Fss@h/db", "p%2Fss and p/ss", "xxxxx and xxxxx"},
		{"query", "postgres://h/db?sslmode=disable&password=qpw9", "password=qpw9&", "password=xxxxx&"},
		{"keyword", "host=h password=kpw77 user=u", "password=kpw77 user", "password=xxxxx user"},
		{"keyword quoted", `host=h password='a b\'c' user=u`, `'a b\'c' and a b'c`, "xxxxx and xxxxx"},
		{"no password", "postgres://u@h/db", "postgres://u@h/db", "postgres://u@h/db"},
	}
	for _, tt := range tests {
		if got := redact(tt.msg, tt.conn); got != tt.want {
			t.Errorf("%s: redact(%q) = %q, want %q", tt.name, tt.msg, got, tt.want)
		}
	}
}

// Whatever the password, neither it nor its escaped form survives in a
// message that quotes the connection string and the password.
func TestRedactProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		// No 'x', which the redaction itself is made of; long enough not
		// to occur by chance in the rest of the message.
		pw := rapid.StringMatching(`[A-Za-wyz0-9 !"#$%&'()*+,./:;<=>?@\[\\\]^_{|}~-]{8,24}`).Draw(t, "password")
		u := url.URL{Scheme: "postgres", User: url.UserPassword("weir", pw), Host: "db.example:5432", Path: "/test"}
		quoted := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'"
		for _, conn := range []string{
			u.String(),
			"host=db.example user=weir password=" + quoted + " dbname=test",
			"postgres://db.example/test?password=" + url.QueryEscape(pw),
		} {
			msg := "cannot parse `" + conn + "`: invalid (" + pw + ")"
			got := redact(msg, conn)
			for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
				if strings.Contains(got, form) {
					t.Fatalf("redact(%q, %q) = %q, which still holds %q", msg, conn, got, form)
				}
			}
		}
	})
}
