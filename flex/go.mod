module github.com/kubeprov/external-storage/flex

go 1.26
