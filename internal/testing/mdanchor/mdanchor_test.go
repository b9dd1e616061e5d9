package mdanchor

import (
	"reflect"
	"testing"
)

func TestAnchors(t *testing.T) {
	doc := "# Runbooks\n\n## SparkOOMKill\ntext # not a heading\n```sh\n# a comment in code\n```\n### What to do: step 1 (flush)\n#### GB10's `nvidia-smi` view\n"
	want := map[string]bool{
		"runbooks":                true,
		"sparkoomkill":            true,
		"what-to-do-step-1-flush": true,
		"gb10s-nvidia-smi-view":   true,
	}
	if got := Anchors([]byte(doc)); !reflect.DeepEqual(got, want) {
		t.Errorf("Anchors = %v, want %v", got, want)
	}
}
