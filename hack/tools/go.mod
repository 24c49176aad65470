module github.com/kubeprov/external-storage/hack/tools

go 1.26
