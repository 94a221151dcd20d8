package parley

// operations_gen.go holds the typed methods of the library's operation catalog; the
// generator reads the catalog of the library it is built against.
//go:generate go run ./internal/gencatalog -o operations_gen.go
