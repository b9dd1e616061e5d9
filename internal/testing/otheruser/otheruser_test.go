package otheruser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandRunsAsNobody(t *testing.T) {
	out, err := Command(t, "id", "-u").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "65534" {
		t.Fatalf("id -u as the other user = %q, want 65534", got)
	}
}

func TestNobodyCannotWriteARootFile(t *testing.T) {
	dir := Dir(t)
	if fi, err := os.Stat(dir); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("the shared directory is %v (%v), want drwxrwxrwt", fi.Mode(), err)
	}
	target := filepath.Join(dir, "root-owned")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Command(t, "sh", "-c", "echo y > "+target).Run(); err == nil {
		t.Fatal("nobody wrote a root-owned 0644 file: the switch did not happen")
	}
	if err := Command(t, "touch", filepath.Join(dir, "planted")).Run(); err != nil {
		t.Fatalf("nobody could not create a file in the shared directory: %v", err)
	}
}
