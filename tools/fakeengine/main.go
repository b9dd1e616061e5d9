// Command fakeengine is an inference engine as another user of the box
// may run one, for the tests of the built exporter: copied under an
// engine's name and started as `vllm serve --port N`, it serves
// internal/testing/fakeengine's vLLM figures at 127.0.0.1:N and prints one
// line per question saying whether it carried a key (never the key). With
// FAKEENGINE_LISTEN=no it holds no listener and waits for a signal.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
)

func main() {
	port := ""
	for i, a := range os.Args {
		if a == "--port" && i+1 < len(os.Args) {
			port = os.Args[i+1]
		}
	}
	if os.Getenv("FAKEENGINE_LISTEN") == "no" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		fmt.Fprintln(os.Stderr, `msg="Listening on" address=none`)
		<-stop
		return
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "msg=\"Listening on\" address=%s\n", l.Addr())
	figures := fakeengine.Figures{KVCache: 0.5, Running: 1, Model: "fake"}
	log.Fatal(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("asked %s key=%t\n", r.URL.Path, r.Header.Get("Authorization") != "")
		fmt.Fprint(w, fakeengine.Metrics("vllm", figures))
	})))
}
