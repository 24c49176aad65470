module github.com/kubeprov/external-storage/hostpath

go 1.26
