// Command chartgen regenerates quotakit's Helm charts (the templates
// named zz_generated.* and values.yaml) from the kustomize tree:
//
//	go run ./cmd/chartgen [-deploy ../deploy] [-out .]
//
// run from kube/charts, which `go generate ./...` does.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quotakit/quotakit/kube/charts/chartgen"
)

func main() {
	deploy := flag.String("deploy", "../deploy", "the kustomize tree")
	out := flag.String("out", ".", "the directory that holds the charts")
	flag.Parse()
	files, err := chartgen.Generate(*deploy)
	if err == nil {
		err = chartgen.Write(*out, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
