#!/usr/bin/env bash
# The layout documents follow the tree: every workspace member (Cargo.toml `[workspace] members`)
# has a row `| PATH/ | CRATE |` with the crate name its own Cargo.toml gives, in README.md's
# "Layout" table and in docs/architecture.md's crate map, and every folder either table names
# exists. Prints what differs and exits 1; silent and 0 when they match.
# Usage: hack/layout.sh
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
members=$(sed -n 's/^members = \[\(.*\)\]$/\1/p' Cargo.toml | tr -d '" ' | tr ',' '\n')
[[ -n "$members" ]] || { echo "hack/layout.sh: no members line in Cargo.toml" >&2; exit 1; }

for member in $members; do
  name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$member/Cargo.toml" | head -n 1)
  for doc in README.md docs/architecture.md; do
    if ! grep -qF "| \`$member/\` | \`$name\`" "$doc"; then
      echo "hack/layout.sh: $doc has no row | \`$member/\` | \`$name\` | for the member $member" >&2
      status=1
    fi
  done
done

# Every folder a table row starts with exists, and every crate it names as a member is one.
for doc in README.md docs/architecture.md; do
  while IFS='|' read -r _ folder crate _; do
    folder=$(sed 's/^ *`\(.*\)` *$/\1/' <<<"$folder")
    crate=$(sed -n 's/^ *`\(ichor-[a-z-]*\)`.*$/\1/p' <<<"$crate")
    [[ "$folder" == */ && "$folder" != [~/]* ]] || continue
    if [[ ! -d "$folder" ]]; then
      echo "hack/layout.sh: $doc names the folder $folder, which does not exist" >&2
      status=1
    elif [[ -n "$crate" && -f "$folder/Cargo.toml" ]] &&
      ! grep -qx "name = \"$crate\"" "$folder/Cargo.toml"; then
      echo "hack/layout.sh: $doc says $folder is $crate; its Cargo.toml says otherwise" >&2
      status=1
    fi
  done < <(grep -E '^\| `[^`]+/` \|' "$doc")
done
exit "$status"
