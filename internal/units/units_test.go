package units

import "testing"

func TestFormatGiB(t *testing.T) {
	for bytes, want := range map[float64]string{0: "0.0 GiB", gib: "1.0 GiB", 16.5 * gib: "16.5 GiB", 4 * 1e9: "3.7 GiB", -2 * gib: "-2.0 GiB"} {
		if got := FormatGiB(bytes); got != want {
			t.Errorf("FormatGiB(%g) = %q, want %q", bytes, got, want)
		}
	}
}
