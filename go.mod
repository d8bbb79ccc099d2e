module github.com/jail-sandbox/jail

go 1.26.0

require (
	github.com/cyphar/filepath-securejoin v0.7.0
	golang.org/x/sys v0.49.0
)

require cyphar.com/go-pathrs v0.2.5 // indirect
