package store_test

import (
	"reflect"
	"testing"

	"github.com/weirhq/weir/store"
)

// TestExecutorIsItsRolesEachMethodOnce: Executor is the union of the role
// interfaces that consumers take, and no method belongs to two roles, so
// that each consumer's narrowest role says exactly what it uses.
func TestExecutorIsItsRolesEachMethodOnce(t *testing.T) {
	roles := map[string]reflect.Type{
		"Jobs":        reflect.TypeFor[store.Jobs](),
		"Leases":      reflect.TypeFor[store.Leases](),
		"Deadlines":   reflect.TypeFor[store.Deadlines](),
		"Sweep":       reflect.TypeFor[store.Sweep](),
		"Outbox":      reflect.TypeFor[store.Outbox](),
		"Inbox":       reflect.TypeFor[store.Inbox](),
		"Workflows":   reflect.TypeFor[store.Workflows](),
		"Ledger":      reflect.TypeFor[store.Ledger](),
		"DeadLetters": reflect.TypeFor[store.DeadLetters](),
		"Operator":    reflect.TypeFor[store.Operator](),
		"Results":     reflect.TypeFor[store.Results](),
		"Retention":   reflect.TypeFor[store.Retention](),
		"Pauses":      reflect.TypeFor[store.Pauses](),
		"Limits":      reflect.TypeFor[store.Limits](),
	}
	owner := map[string]string{}
	for name, role := range roles {
		if role.NumMethod() == 0 {
			t.Errorf("role %s has no method", name)
		}
		for m := range role.Methods() {
			if other, dup := owner[m.Name]; dup {
				t.Errorf("%s is in two roles, %s and %s", m.Name, other, name)
			}
			owner[m.Name] = name
		}
	}
	ex := reflect.TypeFor[store.Executor]()
	if ex.NumMethod() != len(owner) {
		t.Errorf("Executor has %d methods, its roles %d", ex.NumMethod(), len(owner))
	}
	for m := range ex.Methods() {
		if owner[m.Name] == "" {
			t.Errorf("Executor.%s is in no role", m.Name)
		}
	}
}
