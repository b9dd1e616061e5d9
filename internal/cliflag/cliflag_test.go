package cliflag

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

func TestBadValueNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pool.reserve=lots"}, `invalid value "lots" for flag --pool.reserve`},
		{[]string{"--pool.reserve=-1GiB"}, "--pool.reserve"},
		{[]string{"--interval=0s"}, `--interval: must be greater than zero`},
		{[]string{"--interval=soon"}, `--interval`},
		{[]string{"--count=7"}, `for flag --count: must be between 1 and 5`},
		{[]string{"--ratio=NaN"}, `for flag --ratio: must be between 0 and 1`},
	} {
		app := kingpin.New("t", "")
		Bytes(app.Flag("pool.reserve", "").Default("4GiB"))
		Duration(app.Flag("interval", "").Default("5s"))
		Int(app.Flag("count", "").Default("1"), 1, 5)
		Float(app.Flag("ratio", "").Default("0.5"), 0, 1)
		_, err := app.Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestValuesAndDefaults(t *testing.T) {
	app := kingpin.New("t", "")
	reserve := Bytes(app.Flag("pool.reserve", "").Default("4GiB"))
	interval := Duration(app.Flag("interval", "").Default("5s"))
	count := Int(app.Flag("count", "").Default("1"), 1, 5)
	ratio := Float(app.Flag("ratio", "").Default("0.5"), 0, 1)
	if _, err := app.Parse([]string{"--pool.reserve=512MiB", "--count=5"}); err != nil {
		t.Fatal(err)
	}
	if *reserve != 512<<20 || *interval != 5*time.Second || *count != 5 || *ratio != 0.5 {
		t.Errorf("got reserve=%d interval=%v count=%d ratio=%v", *reserve, *interval, *count, *ratio)
	}
}

func TestListKeepsEveryValueAndNamesTheFlagOnABadOne(t *testing.T) {
	parseEven := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n%2 != 0 {
			return 0, fmt.Errorf("not an even number")
		}
		return n, nil
	}
	app := kingpin.New("t", "")
	evens := List(app.Flag("even", ""), parseEven)
	if _, err := app.Parse([]string{"--even=2", "--even=8", "--even=4"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*evens, []int{2, 8, 4}) {
		t.Errorf("got %v, want [2 8 4]", *evens)
	}

	app = kingpin.New("t", "")
	List(app.Flag("even", ""), parseEven)
	_, err := app.Parse([]string{"--even=2", "--even=3"})
	if want := `invalid value "3" for flag --even: not an even number`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}

	app = kingpin.New("t", "")
	none := List(app.Flag("even", ""), parseEven)
	if _, err := app.Parse(nil); err != nil || len(*none) != 0 {
		t.Errorf("no flag given: got %v, %v; want an empty list", *none, err)
	}
}

// Kingpin reads --switch=value as a switch and a stray argument, and says
// only "unexpected value"; the value is refused naming the switch instead,
// for the application's switches and its commands'.
func TestSwitchGivenAValueNamesTheFlag(t *testing.T) {
	app := kingpin.New("t", "")
	app.Flag("collector.gpu", "").Default("true").Bool()
	app.Flag("path", "").String()
	cmd := app.Command("plan", "")
	cmd.Flag("json", "").Bool()
	for _, tc := range []struct {
		args []string
		want string // "" when the arguments are fine
	}{
		{[]string{"--collector.gpu=maybe"}, `invalid value "maybe" for flag --collector.gpu: a switch takes no value; give --collector.gpu or --no-collector.gpu`},
		{[]string{"--no-collector.gpu=false"}, `invalid value "false" for flag --collector.gpu`},
		{[]string{"--collector.gpu=true"}, `invalid value "true" for flag --collector.gpu`},
		{[]string{"plan", "--json=yes"}, `invalid value "yes" for flag --json`},
		{[]string{"--collector.gpu", "--no-collector.gpu", "plan", "--json"}, ""},
		// The value of a flag that takes one is not a flag.
		{[]string{"--path", "--collector.gpu=x"}, ""},
		{[]string{"--path=--collector.gpu=x"}, ""},
		{[]string{"--", "--collector.gpu=x"}, ""},
		{[]string{"--unknown=x", "-h"}, ""},
	} {
		err := RefuseSwitchValues(app.Model(), tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: refused: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

// Issue 28, item 10: a URL refused is quoted without its credentials,
// parseable or not.
func TestRefusedURLHidesItsPassword(t *testing.T) {
	for _, value := range []string{"ftp://user:Secret123@host", "http://user:Secret123@ho st:%zz/", "http://:Secret123@[::1", "gopher://Secret123@x/y@z"} {
		app := kingpin.New("test", "")
		Value(app.Flag("url", ""), func(s string) (string, error) { return "", errors.New("not an http(s) URL") })
		_, err := app.Parse([]string{"--url=" + value})
		if err == nil || strings.Contains(err.Error(), "Secret123") || !strings.Contains(err.Error(), "xxxxx@") {
			t.Errorf("%s: %v", value, err)
		}
	}
}

// GB is 10^9 bytes and GiB 2^30, as the standards have them; a unit that
// could be read either way is refused with both readings named.
func TestParseBytesUnits(t *testing.T) {
	for in, want := range map[string]uint64{
		"4GiB": 4 << 30, "4GB": 4e9, "512MiB": 512 << 20, "512MB": 512e6, "1.5GiB": 3 << 29,
		"2KiB": 2048, "2kB": 2000, "2KB": 2000, "1TiB": 1 << 40, "1TB": 1e12, "4096": 4096, "10B": 10, "0": 0,
	} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"4G": "ambiguous", "4g": "ambiguous", "4gb": "ambiguous", "4gib": "ambiguous",
		"-1GiB": "negative", "GiB": "not a size", "": "not a size", "1.2.3GiB": "not a size", "1e30TiB": "ambiguous or unknown",
		"99999999TiB": "too large",
	} {
		if _, err := parseBytes(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseBytes(%q): error %v, want one saying %q", in, err, msg)
		}
	}
	if _, err := parseBytes("4G"); err == nil || !strings.Contains(err.Error(), "GiB for 2^30 bytes or GB for 10^9") {
		t.Errorf("the ambiguous unit's error names neither reading: %v", err)
	}
}
