module github.com/weirhq/weir

go 1.26

require pgregory.net/rapid v1.3.0
