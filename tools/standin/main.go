// Command standin builds the GB10 stand-in libnvidia-ml.so.1 (see
// docs/standin-nvml.md), or checks scenario files:
//
//	go run ./tools/standin -o .build/nvml
//	go run ./tools/standin -check testdata/nvml/scenarios/*.scenario
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
)

func main() {
	out := flag.String("o", ".build/nvml", "directory to build libnvidia-ml.so.1 in")
	check := flag.Bool("check", false, "check the scenario files named as arguments instead of building")
	flag.Parse()

	if *check {
		status := 0
		for _, path := range flag.Args() {
			text, err := os.ReadFile(path)
			if err == nil {
				err = standin.CheckScenario(text)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
				status = 1
			}
		}
		os.Exit(status)
	}

	lib, err := standin.Build(".", *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(lib)
}
