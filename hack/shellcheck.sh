#!/usr/bin/env bash
# `make lint`'s shell part: shellcheck (Debian's package; installed with apt-get when missing,
# as root) on every script of hack/ and deploy/ and on .ci/run, following their sourced files
# (the `# shellcheck source=` directives name them from the repository root).
set -o errexit -o nounset -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/prereqs.sh
source "$REPO/hack/lib/prereqs.sh"
cd "$REPO"

install_missing lint
if ! command -v shellcheck >/dev/null; then
  echo "shellcheck is not installed: apt-get install shellcheck (hack/doctor.sh)" >&2
  exit 1
fi
mapfile -t scripts < <(git ls-files --cached --others --exclude-standard -- 'hack/*.sh' 'deploy/*.sh' .ci/run)
shellcheck --external-sources "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean" >&2
