module github.com/kubeprov/external-storage/nfs

go 1.26
