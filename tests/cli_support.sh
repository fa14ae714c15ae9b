# Shared by the command-line test scripts: source "$source_dir/tests/cli_support.sh".

# fails_with STATUS PATTERN COMMAND...: the command exits with STATUS and prints PATTERN (a
# grep pattern) on stderr, which is shown
fails_with() {
  local want="$1" pattern="$2"; shift 2
  local status=0
  "$@" > /dev/null 2> err.txt || status=$?
  cat err.txt
  test "$status" -eq "$want" && grep -q -- "$pattern" err.txt
}
