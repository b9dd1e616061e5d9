package units

import "testing"

func TestFormatGiB(t *testing.T) {
	for bytes, want := range map[float64]string{0: "0.0 GiB", GiB: "1.0 GiB", 16.5 * GiB: "16.5 GiB", 4 * GB: "3.7 GiB", -2 * GiB: "-2.0 GiB"} {
		if got := FormatGiB(bytes); got != want {
			t.Errorf("FormatGiB(%g) = %q, want %q", bytes, got, want)
		}
	}
}
