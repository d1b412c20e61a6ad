package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/weirhq/weir/ingest/api"
	"github.com/weirhq/weir/ingest/search"
)

// index is a Service that can only search; the example calls nothing else.
type index struct{ api.Service }

func (index) Search(_ context.Context, query string, limit int) ([]search.Hit, error) {
	return []search.Hit{{
		ID:        "3f2a9c0e5b7d41e8a6c2f9b0d4e7a1c35b8f0e2d6a9c4b7e1f3d5a8c0b2e4f6a",
		Title:     "Weirs and rivers",
		Source:    "corpus",
		Snippet:   "a «weir» holds the river back",
		Score:     1.5,
		UpdatedAt: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC),
	}}, nil
}

func Example() {
	h, err := api.New(api.Config{Service: index{}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/api/search?q=weir&limit=5")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.Status, res.Header.Get("Content-Type"))
	fmt.Print(string(body))
	// Output:
	// 200 OK application/json
	// {
	//   "hits": [
	//     {
	//       "id": "3f2a9c0e5b7d41e8a6c2f9b0d4e7a1c35b8f0e2d6a9c4b7e1f3d5a8c0b2e4f6a",
	//       "title": "Weirs and rivers",
	//       "source": "corpus",
	//       "summary": "",
	//       "snippet": "a «weir» holds the river back",
	//       "score": 1.5,
	//       "updated_at": "2024-05-06T07:08:09Z"
	//     }
	//   ],
	//   "query": "weir"
	// }
}
