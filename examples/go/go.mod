module parley-examples

go 1.19

require parley v0.0.0

// The binding from this repository (bindings/go); a copy elsewhere points at its own path.
replace parley => ../../bindings/go
