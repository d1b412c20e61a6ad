// Package enumname names the values of weir's small enumerations from a
// table, the way their String methods print them.
package enumname

import "fmt"

// Of returns names[v], or typ(v) (e.g. "State(7)") for a value the table
// does not name.
func Of[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}
