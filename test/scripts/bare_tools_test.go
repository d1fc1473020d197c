package scripts

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository root, two folders above this package.
const repoRoot = "../.."

// bashArray returns the words of the bash array NAME=( ... ) in file (one line or several).
func bashArray(t *testing.T, file, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?ms)^` + regexp.QuoteMeta(name) + `=\((.*?)\)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("%s: no %s=( ... )", file, name)
	}
	var words []string
	for _, l := range strings.Split(string(m[1]), "\n") {
		l, _, _ = strings.Cut(l, "#")
		words = append(words, strings.Fields(l)...)
	}
	return words
}

// shellScripts lists the repository's shell scripts: *.sh under hack/ and deploy/, and .ci/run.
func shellScripts(t *testing.T) []string {
	t.Helper()
	files := []string{".ci/run"}
	for _, dir := range []string{"hack", "deploy"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".sh") {
				rel, err := filepath.Rel(repoRoot, path)
				if err != nil {
					return err
				}
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// bareCall finds a project tool used as a command name rather than through tool_path: the
// first word of a command (after ;, &, |, (, `, {, !, then/do/else, or a wrapper such as exec,
// xargs, command -v or which; environment assignments before it are skipped).
func bareCall(tools []string) *regexp.Regexp {
	names := make([]string, len(tools))
	for i, n := range tools {
		names[i] = regexp.QuoteMeta(n)
	}
	cmdStart := `(?:^|[;&|(` + "`" + `{!]|\b(?:then|do|else|exec|time|nohup|setsid|xargs|sudo|env|which|command(?:\s+-v)?)\s)`
	assigns := `(?:\s*[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*`
	return regexp.MustCompile(cmdStart + assigns + `\s*(` + strings.Join(names, "|") + `)(?:[\s;&|]|$)`)
}

var (
	heredocStart = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)
	// caseArm is a case pattern such as `kubelet)` or `etcd | kube-apiserver)` opening a line.
	caseArm   = regexp.MustCompile(`^\s*\(?[\w.*|\s-]+\)`)
	arrayOpen = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*\+?=\(`)
)

// codeScanner blanks what bash does not run as a command from script text, line by line,
// keeping its state across lines: comments, single-quoted text, and the literal parts of
// double-quoted text (their $( ) substitutions stay, being commands).
type codeScanner struct {
	// stack of open contexts: '"' a double-quoted string, '(' a subshell or $( ).
	stack []byte
}

func (s *codeScanner) inQuotes() bool { return len(s.stack) > 0 && s.stack[len(s.stack)-1] == '"' }

// line returns the code of one line, literal text replaced by '_'.
func (s *codeScanner) line(l string) string {
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c == '\\':
			b.WriteString("__")
			i++
		case s.inQuotes() && c == '"':
			s.stack = s.stack[:len(s.stack)-1]
			b.WriteByte(c)
		case c == '$' && i+1 < len(l) && l[i+1] == '(':
			s.stack = append(s.stack, '(')
			b.WriteString("$(")
			i++
		case s.inQuotes():
			b.WriteByte('_')
		case c == '"':
			s.stack = append(s.stack, '"')
			b.WriteByte(c)
		case c == '\'':
			j := strings.IndexByte(l[i+1:], '\'')
			if j < 0 {
				return b.String() // a quote spanning lines: none in these scripts' code
			}
			b.WriteString("''")
			i += j + 1
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return b.String()
		case c == '(':
			s.stack = append(s.stack, '(')
			b.WriteByte(c)
		case c == ')':
			if len(s.stack) > 0 {
				s.stack = s.stack[:len(s.stack)-1]
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// bareCalls returns "file:line: text" for each bare call of a tool in the script text.
func bareCalls(file, text string, call *regexp.Regexp) []string {
	var out []string
	var heredocEnd string
	var sc codeScanner
	inArray := false
	lines := bufio.NewScanner(strings.NewReader(text))
	for n := 1; lines.Scan(); n++ {
		line := lines.Text()
		if heredocEnd != "" {
			if strings.TrimSpace(line) == heredocEnd {
				heredocEnd = ""
			}
			continue
		}
		code := sc.line(line)
		if inArray {
			inArray = !strings.Contains(code, ")")
			continue
		}
		if loc := arrayOpen.FindStringIndex(code); loc != nil {
			if rest := code[loc[1]:]; !strings.Contains(rest, ")") {
				inArray = true
			}
			code = code[:loc[0]]
		}
		if !strings.Contains(code, "<<<") {
			if m := heredocStart.FindStringSubmatch(code); m != nil {
				heredocEnd = m[1]
			}
		}
		code = caseArm.ReplaceAllString(code, "")
		if call.MatchString(code) {
			out = append(out, fmt.Sprintf("%s:%d: %s", file, n, strings.TrimSpace(line)))
		}
	}
	return out
}

// TestScriptsReachProjectToolsThroughToolPath: no script calls a program the project builds
// (hack/lib/bins.sh PROJECT_TOOLS: ctr, containerd, kubectl, kwok, etcd, helm, …) by its bare
// name, which would run whatever the machine has on PATH (or nothing, on a fresh machine).
func TestScriptsReachProjectToolsThroughToolPath(t *testing.T) {
	tools := bashArray(t, "hack/lib/bins.sh", "PROJECT_TOOLS")
	for _, want := range []string{"ctr", "containerd", "kubectl", "helm"} {
		if !slices.Contains(tools, want) {
			t.Fatalf("hack/lib/bins.sh PROJECT_TOOLS lacks %s: %v", want, tools)
		}
	}
	call := bareCall(tools)
	for _, f := range shellScripts(t) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range bareCalls(f, string(raw), call) {
			t.Errorf("%s\n\tcalls a project-built tool from PATH: use \"$(tool_path NAME)\" (hack/lib/bins.sh) or kubectl_/ctr_", c)
		}
	}
}

// TestBareCallDetection: what the check above flags and what it lets through.
func TestBareCallDetection(t *testing.T) {
	call := bareCall([]string{"ctr", "kubectl", "kube-apiserver", "etcd"})
	cases := []struct {
		script string
		bare   bool
	}{
		{"ctr images import x.tar", true},
		{"  ctr -n k8s.io images ls", true},
		{`have=$(ctr images ls -q)`, true},
		{"x && kubectl get pods", true},
		{"FOO=1 kubectl apply -f -", true},
		{"if command -v ctr >/dev/null; then", true},
		{`echo "$(ctr version)"`, true},
		{`die "x $(kubectl get pods -o 'jsonpath={.items}')"`, true},
		{`banner "GPU environment (kubectl logs)"`, false},
		{`log "a; ctr images ls"`, false},
		{"GOBIN=$BIN.kwok go install x", false},
		{"KUBELET_DIR=/var/lib/kubelet", false},
		{"NODE_MODE=kwok", false},
		{"  helm) pkg=helm.sh/helm/v4/cmd/helm ;;", false},
		{"die \"multi\nline (kubectl apply)\"\nctr images ls", true},
		{"echo hi | xargs kubectl delete", true},
		{"then kubectl get nodes", true},
		{`"$(tool_path ctr)" images ls`, false},
		{"kubectl_ get pods", false},
		{"ctr_ images import x.tar", false},
		{"stop_proc kube-apiserver", false},
		{"for b in etcd kube-apiserver; do", false},
		{`log "kubectl inspect gpushare not built"`, false},
		{"# ctr images ls", false},
		{"  kube-apiserver) start_apiserver ;;", false},
		{"  etcd | kube-apiserver) start ;;", false},
		{"want=(etcd kube-apiserver\n  ctr kubectl)", false},
		{"cat <<EOF\nkubectl get pods\nEOF", false},
		{"sed 's/x/ctr y/'", false},
		{"cat <<EOF\nx\nEOF\nctr version", true},
	}
	for _, c := range cases {
		got := bareCalls("t.sh", c.script, call)
		if (len(got) > 0) != c.bare {
			t.Errorf("%q: flagged %v, want %v (%v)", c.script, len(got) > 0, c.bare, got)
		}
	}
}
