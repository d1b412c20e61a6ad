package crashpoint_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/weirhq/weir/internal/crashpoint"
)

// The child process passes the point twice, then dies on the third pass.
func TestHitKillsOnThePassAfterTheCount(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		if err := crashpoint.Arm(os.Getenv(crashpoint.Env)); err != nil {
			t.Fatal(err)
		}
		crashpoint.Hit("other")
		crashpoint.Hit("x")
		crashpoint.Hit("x")
		fmt.Println("passed twice")
		crashpoint.Hit("x")
		fmt.Println("not reached")
		return
	}
	out, err := runChild("TestHitKillsOnThePassAfterTheCount", "CRASHPOINT_CHILD=1", crashpoint.Env+"=x:2")
	if !crashpoint.Killed(err) {
		t.Fatalf("child ended with %v, want SIGKILL; output %q", err, out)
	}
	if !strings.Contains(string(out), "passed twice") || strings.Contains(string(out), "not reached") {
		t.Fatalf("child printed %q", out)
	}
}

// The package arms nothing by itself: a process whose environment names a
// point passes it unharmed until the program calls Arm.
func TestNothingArmedWithoutArm(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "unarmed" {
		crashpoint.Hit("x")
		fmt.Println("passed unarmed")
		return
	}
	out, err := runChild("TestNothingArmedWithoutArm", "CRASHPOINT_CHILD=unarmed", crashpoint.Env+"=x")
	if err != nil || !strings.Contains(string(out), "passed unarmed") {
		t.Fatalf("child: %v, output %q; want it to pass the point unarmed", err, out)
	}
}

func TestArmRefusesABadCount(t *testing.T) {
	for _, spec := range []string{"x:", "x:-1", "x:two", ":3"} {
		if err := crashpoint.Arm(spec); err == nil || !strings.Contains(err.Error(), crashpoint.Env) {
			t.Errorf("Arm(%q): %v, want an error naming %s", spec, err, crashpoint.Env)
		}
	}
	if err := crashpoint.Arm(""); err != nil {
		t.Fatal(err)
	}
	crashpoint.Hit("x") // disarmed: returns
}

// runChild runs the test named test of this test binary in a process of
// its own, with env added to its environment, and returns its output.
func runChild(test string, env ...string) ([]byte, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	return cmd.Output()
}

// Killed tells a death by SIGKILL from another exit, and from no error.
func TestKilled(t *testing.T) {
	for _, c := range []struct {
		script string
		want   bool
	}{
		{"kill -KILL $$", true},
		{"kill -TERM $$", false},
		{"exit 1", false},
		{"exit 0", false},
	} {
		err := exec.Command("sh", "-c", c.script).Run()
		if got := crashpoint.Killed(err); got != c.want {
			t.Errorf("sh -c %q: Killed(%v) = %v, want %v", c.script, err, got, c.want)
		}
	}
}
