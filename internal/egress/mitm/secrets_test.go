package mitm

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestNewPlaceholderKeepsTheShape(t *testing.T) {
	tests := []struct {
		name, value string
		prefix      string
		charset     string // every character after the prefix is one of these
		length      int    // 0: the value's
	}{
		{"classic GitHub", "ghp_" + strings.Repeat("aB3", 12), "ghp_", base62, 0},
		{"GitHub OAuth", "gho_" + strings.Repeat("Zz9", 12), "gho_", base62, 0},
		{"fine-grained GitHub", "github_pat_11ABCDEFG0" + strings.Repeat("x_Y1", 18), "github_pat_", base62 + "_", 0},
		{"GitLab", "glpat-" + "aB3_-cD4eF5gH6iJ7kL8", "glpat-", base62 + "_-", 0},
		{"Anthropic", "sk-ant-api03-" + strings.Repeat("aZ9_-", 19) + "AA", "sk-ant-api03-", base62 + "_-", 0},
		{"OpenAI project", "sk-proj-" + strings.Repeat("aZ9_-", 30), "sk-proj-", base62 + "_-", 0},
		{"OpenAI legacy", "sk-" + strings.Repeat("aZ9", 16), "sk-", base62, 0},
		{"Slack bot", "xoxb-1234567890-1234567890123-" + strings.Repeat("aZ9", 8), "xoxb-", digits + "-" + base62, 0},
		{"AWS access key", "AKIA" + "IOSFODNN7EXAMPLE", "AKIA", upper + digits, 0},
		{"Google API key", "AIza" + strings.Repeat("Sy_-9", 7), "AIza", base62 + "_-", 0},
		{"a long random secret", strings.Repeat("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1), "", base62, 0},
		{"a short password", "hunter2", "", lower + digits, 25},
		{"digits only", "123456", "", digits, 39},
		{"symbols only", "!!!!", "", base62, 22},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlaceholder("X", tc.value)
			if err != nil {
				t.Fatal(err)
			}
			q, _ := NewPlaceholder("X", tc.value)
			if p == q {
				t.Errorf("two placeholders alike: %q", p)
			}
			if p == tc.value || strings.Contains(p, tc.value) || strings.Contains(tc.value, p) {
				t.Errorf("placeholder %q holds or is held by the value", p)
			}
			if !strings.HasPrefix(p, tc.prefix) {
				t.Errorf("%q lost the prefix %q", p, tc.prefix)
			}
			want := tc.length
			if want == 0 {
				want = len(tc.value)
			}
			if len(p) != want {
				t.Errorf("%q is %d long, want %d", p, len(p), want)
			}
			for _, c := range p[len(tc.prefix):] {
				if !strings.ContainsRune(tc.charset, c) {
					t.Errorf("%q has %q, outside %q", p, c, tc.charset)
				}
			}
			if err := validPlaceholder(p); err != nil {
				t.Errorf("%q: %v", p, err)
			}
		})
	}
	t.Run("Slack separators stay", func(t *testing.T) {
		v := "xoxb-1234567890-1234567890123-" + strings.Repeat("aZ9", 8)
		p, _ := NewPlaceholder("X", v)
		if p[15] != '-' || p[29] != '-' || strings.Count(p, "-") != 3 {
			t.Errorf("%q lost the structure of %q", p, v)
		}
	})
}

func TestNewSecretsRefuses(t *testing.T) {
	ok := Binding{Name: "A", Value: ptr("value-of-a-0123456789"), Hosts: []string{"a.test"}}
	with := func(f func(b *Binding)) []Binding { b := ok; f(&b); return []Binding{b} }
	tests := []struct {
		name     string
		bindings []Binding
		want     string
	}{
		{"nothing", nil, "no secret"},
		{"a bad name", with(func(b *Binding) { b.Name = "A-B" }), "variable name"},
		{"an empty value", with(func(b *Binding) { b.Value = ptr("") }), "empty value"},
		{"a newline in the value", with(func(b *Binding) { b.Value = ptr("abc\r\nX-Injected: 1") }), "control character"},
		{"no host", with(func(b *Binding) { b.Hosts = nil }), "no host"},
		{"a wildcard host", with(func(b *Binding) { b.Hosts = []string{"*.a.test"} }), "exact host"},
		{"a short placeholder", with(func(b *Binding) { b.Placeholder = "short" }), "16 characters"},
		{"a placeholder with a space", with(func(b *Binding) { b.Placeholder = "placeholder with spaces" }), "[A-Za-z0-9_.-]"},
		{"the value as placeholder", with(func(b *Binding) { b.Placeholder = *b.Value }), "hold one another"},
		{"a name twice", []Binding{ok, ok}, "bound twice"},
		{"a placeholder inside another", []Binding{
			{Name: "A", Value: ptr("aaaaaaaaaaaaaaaaaaaa"), Placeholder: "PLACEHOLDER_ONE_LONG", Hosts: []string{"a.test"}},
			{Name: "B", Value: ptr("bbbbbbbbbbbbbbbbbbbb"), Placeholder: "PLACEHOLDER_ONE_LONGER", Hosts: []string{"b.test"}}}, "part of another"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSecrets("box", tc.bindings, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			for _, b := range tc.bindings {
				if b.Value != nil && *b.Value != "" && strings.Contains(err.Error(), *b.Value) {
					t.Errorf("the error shows a value: %v", err)
				}
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	s := newTestSecrets(t, Options{})
	plain := newTestSecrets(t, Options{PlainHTTP: true})
	tests := []struct {
		name    string
		s       *Secrets
		host    string
		target  string
		header  func(ph, other string) http.Header
		wantErr string
		want    func(v string) http.Header
	}{
		{name: "plain HTTP to the bound host is refused by default", s: s, host: "api.test",
			header:  func(ph, _ string) http.Header { return http.Header{"Authorization": {"Bearer " + ph}} },
			wantErr: "secret TOKEN: is only sent over TLS"},
		{name: "plain HTTP to the bound host when allowed", s: plain, host: "api.test",
			header: func(ph, _ string) http.Header {
				return http.Header{"Authorization": {"Bearer " + ph}, "X-K": {"a", "b" + ph + "c"}}
			},
			want: func(v string) http.Header {
				return http.Header{"Authorization": {"Bearer " + v}, "X-K": {"a", "b" + v + "c"}}
			}},
		{name: "basic credentials when allowed", s: plain, host: "api.test",
			header: func(ph, _ string) http.Header {
				return http.Header{"Authorization": {"basic " + base64.RawURLEncoding.EncodeToString([]byte("u:"+ph))}}
			},
			want: func(v string) http.Header {
				return http.Header{"Authorization": {"basic " + base64.StdEncoding.EncodeToString([]byte("u:"+v))}}
			}},
		{name: "a placeholder to a host no secret is bound to", s: plain, host: "elsewhere.test",
			header:  func(ph, _ string) http.Header { return http.Header{"X-Token": {ph}} },
			wantErr: "secret TOKEN: is not bound to (placeholder in the header X-Token of a request to) elsewhere.test"},
		{name: "another secret's placeholder", s: plain, host: "api.test",
			header:  func(ph, other string) http.Header { return http.Header{"Cookie": {"a=" + ph + "; b=" + other}} },
			wantErr: "secret OTHER: is not bound to"},
		{name: "percent-encoded twice in a header", s: plain, host: "api.test",
			header: func(_, other string) http.Header {
				return http.Header{"Referer": {"https://x/?q=" + strings.ReplaceAll(percentAll(other), "%", "%25")}}
			},
			wantErr: "secret OTHER: is not bound to"},
		{name: "in the target, with a bad escape before it", s: plain, host: "api.test", target: "/a%zz?k={other%}",
			header: func(string, string) http.Header { return http.Header{} }, wantErr: "placeholder in the target"},
		{name: "nothing to do", s: s, host: "elsewhere.test",
			header: func(string, string) http.Header { return http.Header{"Accept": {"*/*"}} },
			want:   func(string) http.Header { return http.Header{"Accept": {"*/*"}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ph, other := placeholderOf(t, tc.s, "TOKEN"), placeholderOf(t, tc.s, "OTHER")
			h := tc.header(ph, other)
			err := tc.s.RewriteRequest(tc.host, strings.ReplaceAll(tc.target, "{other%}", percentAll(other)), h)
			if tc.wantErr != "" {
				var re *RefusedError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &re) || re.Status != 403 {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), tokenValue) || strings.Contains(err.Error(), otherValue) {
					t.Errorf("the error shows a value")
				}
				if strings.Contains(flatten(h), tokenValue) || strings.Contains(flatten(h), otherValue) {
					t.Errorf("a refused request's headers got a value")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want(tokenValue); flatten(h) != flatten(want) && fmt.Sprint(h) != fmt.Sprint(want) {
				t.Errorf("got %q, want %q", h, want)
			}
		})
	}
}

func TestPrintingShowsNoValue(t *testing.T) {
	s := newTestSecrets(t, Options{})
	v := tokenValue
	b := Binding{Name: "TOKEN", Value: &v, Hosts: []string{"api.test"}}
	holder := struct {
		s *Secrets
		b Binding
	}{s, b}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for _, x := range []any{s, *s, b, []Binding{b}, holder, &holder} {
			out := fmt.Sprintf(verb, x)
			if strings.Contains(out, tokenValue) || strings.Contains(out, otherValue) ||
				strings.Contains(out, fmt.Sprintf("%x", tokenValue)) {
				t.Errorf("%s of %T shows a value: %s", verb, x, out)
			}
		}
	}
}

func ptr(s string) *string { return &s }
