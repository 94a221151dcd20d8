module parley

go 1.19
