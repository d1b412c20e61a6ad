package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/internal/tempstore"
)

// Serve the admin API over a store, behind a bearer token.
func Example() {
	s := tempstore.MustOpen(context.Background()) // sqlite.Open and Migrate, in a temporary directory
	defer s.Close()
	h, err := admin.New(admin.Config{Store: s.Executor(), Token: "s3cret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, token := range []string{"", "s3cret"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/admin/outbox", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Print(res.StatusCode, " ", string(body))
	}
	// Output:
	// 401 {
	//   "error": "missing or wrong admin token: send Authorization: Bearer <token> (WEIR_ADMIN_TOKEN)"
	// }
	// 200 {
	//   "oldest_pending_age_seconds": null,
	//   "oldest_pending_at": null,
	//   "pending": 0
	// }
}
