module github.com/weirhq/weir/bench

go 1.26

require github.com/weirhq/weir v0.0.0

require (
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/failsafe-go/failsafe-go v0.9.8 // indirect
	github.com/sony/gobreaker/v2 v2.4.0 // indirect
)

replace github.com/weirhq/weir => ../
