// Package mitm lets a sandbox use a secret it never sees (issue 25,
// --secret NAME@HOST[,HOST]). The sandbox holds a random placeholder in
// the variable NAME; jail's gateway hands every TLS connection to a host a
// secret is bound to to a Secrets, which terminates that TLS with a
// certificate from a per-sandbox certificate authority, reads each
// HTTP/1.1 request, puts the real value where the placeholder stands in
// its headers, and forwards it over TLS to the real host, verified
// against the system's roots.
//
// Invariants:
//   - The authority's private key and the leaves' keys exist only in this
//     process's memory: they are made at NewAuthority or when a leaf is
//     minted and are never written, logged or returned. The sandbox gets
//     the authority's certificate only (CertificatePEM).
//   - The authority can vouch for the bound hosts only: its certificate
//     carries critical X.509 name constraints that permit exactly those
//     DNS names (their subdomains excluded where no bound host lies below
//     them) and the bound IP addresses (every address excluded when none
//     is bound), and it may not sign another authority (path length 0).
//     The package mints leaves only for bound hosts, so even a stolen key
//     signs nothing a verifier would accept for another name.
//   - A value is put into a request only when it goes to a host that
//     secret is bound to, over the TLS this package terminates and
//     re-establishes with a verified host (plain HTTP only when
//     Options.PlainHTTP says so). A request that carries the placeholder
//     of a secret not bound to its host anywhere in its target or headers
//     (also percent-encoded or inside basic credentials) is refused, and
//     so is a request on an intercepted connection whose Host names
//     another host.
//   - Values never appear in errors, in what fmt prints of a Binding or a
//     Secrets, nor in what goes back to the sandbox in response headers:
//     a value a bound host echoes in a response header is replaced by its
//     placeholder. (A bound host that echoes the value in a response body
//     can still show it to the sandbox: see Secrets.ServeTLS.)
//   - Every request on an intercepted connection is read by this package
//     (ALPN offers http/1.1 only; HTTP/2 and anything but HTTP/1.x is
//     refused), so a second request to another host on a kept-alive or
//     pipelined connection is seen and refused.
package mitm
