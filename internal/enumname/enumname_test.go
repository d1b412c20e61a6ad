package enumname

import "testing"

type color uint8

var colorNames = []string{0: "red", 2: "blue"}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		v    color
		want string
	}{{0, "red"}, {2, "blue"}, {1, "color(1)"}, {3, "color(3)"}, {255, "color(255)"}} {
		if got := Of(colorNames, tc.v, "color"); got != tc.want {
			t.Errorf("Of(%d) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
