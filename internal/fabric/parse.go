package fabric

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxLine: the longest the kernel writes here is "400 Gb/sec (4X NDR)".
const maxLine = 64

func line(data []byte) (string, error) {
	v := bytes.TrimSpace(data)
	switch {
	case len(v) == 0:
		return "", errors.New("empty")
	case len(v) > maxLine:
		return "", fmt.Errorf("%d bytes, not an attribute of its kind", len(data))
	case bytes.ContainsAny(v, "\n\r\x00"):
		return "", errors.New("more than one line")
	}
	return string(v), nil
}

func quote(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return strconv.Quote(s)
}

func parseCounter(data []byte) (uint64, error) {
	v, err := line(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a counter: %s", quote(v))
	}
	return n, nil
}

// parseState reads "4: ACTIVE" into the word, any word, so that a newer
// kernel's is not refused.
func parseState(data []byte) (string, error) {
	v, err := line(data)
	if err != nil {
		return "", err
	}
	num, word, ok := strings.Cut(v, ":")
	word = strings.TrimSpace(word)
	if _, err := strconv.ParseUint(strings.TrimSpace(num), 10, 8); !ok || err != nil || !isWord(word) {
		return "", fmt.Errorf("not a port state: %s", quote(v))
	}
	return word, nil
}

func isWord(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_'):
		default:
			return false
		}
	}
	return true
}

func parseWord(data []byte) (string, error) {
	v, err := line(data)
	if err != nil {
		return "", err
	}
	if !isWord(v) {
		return "", fmt.Errorf("not a word: %s", quote(v))
	}
	return v, nil
}

// parseRate reads "2.5 Gb/sec (1X SDR)" into bits per second.
func parseRate(data []byte) (float64, error) {
	v, err := line(data)
	if err != nil {
		return 0, err
	}
	num, rest, _ := strings.Cut(v, " ")
	if rest != "Gb/sec" && !strings.HasPrefix(rest, "Gb/sec (") {
		return 0, fmt.Errorf("not a rate in Gb/sec: %s", quote(v))
	}
	gbits, err := parseDecimal(num)
	if err != nil {
		return 0, fmt.Errorf("not a rate: %s", quote(v))
	}
	return gbits * 1e9, nil
}

// parseLinkWidth refuses 0: a link not trained.
func parseLinkWidth(data []byte) (float64, error) {
	v, err := line(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 8)
	if err != nil || n == 0 || n > 32 {
		return 0, fmt.Errorf("not a PCIe link width: %s", quote(v))
	}
	return float64(n), nil
}

// parseLinkSpeed reads "32.0 GT/s PCIe" (Linux 4.18 on) or "8 GT/s" into
// transfers per second.
func parseLinkSpeed(data []byte) (float64, error) {
	v, err := line(data)
	if err != nil {
		return 0, err
	}
	num, rest, _ := strings.Cut(v, " ")
	if rest != "GT/s" && rest != "GT/s PCIe" {
		return 0, fmt.Errorf("not a PCIe link speed: %s", quote(v))
	}
	gt, err := parseDecimal(num)
	if err != nil || gt == 0 {
		return 0, fmt.Errorf("not a PCIe link speed: %s", quote(v))
	}
	return gt * 1e9, nil
}

// parseDecimal takes no exponent, Inf, sign or hex.
func parseDecimal(s string) (float64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(s) > 12 || strings.Trim(whole, "0123456789") != "" ||
		(dot && (frac == "" || strings.Trim(frac, "0123456789") != "")) {
		return 0, fmt.Errorf("not a decimal: %s", quote(s))
	}
	return strconv.ParseFloat(s, 64)
}

// validNetDev is the kernel's dev_valid_name, in printable ASCII only.
func validNetDev(name string) bool {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == '/' || c == ':' {
			return false
		}
	}
	return true
}

func parseNetDev(data []byte) (string, error) {
	v, err := line(data)
	if err != nil {
		return "", err
	}
	if !validNetDev(v) {
		return "", fmt.Errorf("not an interface name: %s", quote(v))
	}
	return v, nil
}

// validName: IB_DEVICE_NAME_MAX is 64 with its NUL; names are the kernel's
// ("mlx5_0") or rdma-core's udev rules' ("rocep1s0f0").
func validName(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
