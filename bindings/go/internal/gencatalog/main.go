// Command gencatalog writes operations_gen.go from the loaded library's operation catalog:
//
//	go generate ./...            (in bindings/go; package parley's go:generate line runs it)
//	go run ./internal/gencatalog [-o operations_gen.go] [-check]
//
// With -check it writes nothing and exits 1 when the file differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"parley"
	"parley/internal/catalogrender"
)

func main() {
	output := flag.String("o", "operations_gen.go", "the file to write")
	check := flag.Bool("check", false, "exit 1 if the file is out of date, write nothing")
	flag.Parse()
	catalog, err := parley.Operations()
	if err != nil {
		fail(err)
	}
	operations, err := catalogrender.FromCatalog(catalog)
	if err != nil {
		fail(err)
	}
	text, err := catalogrender.Render(operations)
	if err != nil {
		fail(err)
	}
	current, _ := os.ReadFile(*output)
	if bytes.Equal(current, text) {
		fmt.Printf("%s is up to date (%d operations)\n", *output, len(catalog))
		return
	}
	if *check {
		fail(fmt.Errorf("%s is out of date: run %s", *output, catalogrender.Command))
	}
	if err := os.WriteFile(*output, text, 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s (%d operations)\n", *output, len(catalog))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gencatalog:", err)
	os.Exit(1)
}
