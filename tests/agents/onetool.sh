#!/usr/bin/env bash
# A one-tool coding agent written for spice's tests: a CLI spice has no decoder for.
# It writes no transcript; all it says is on its terminal. Each turn it posts the whole
# conversation to a model server ($ONETOOL_URL/onetool, the tests' mock) and gets back
# either `RUN <command>`, which it runs with `bash -c` (so the shell redirector runs it
# through `spice exec`) before asking again, or `SAY` and text, which it prints before
# waiting for the operator's next message on its terminal. A reply whose last line is a
# question is printed as its prompt; otherwise the prompt is `> `.
#
# usage: onetool.sh BRIEF_FILE
set -u
url=${ONETOOL_URL:?ONETOOL_URL names the model server}
conv=$(mktemp "${TMPDIR:-/tmp}/onetool.XXXXXX")
trap 'rm -f "$conv"' EXIT
{ echo "### user"; cat "$1"; echo; } > "$conv"

while true; do
    if ! reply=$(curl -sS --fail --data-binary @"$conv" "$url/onetool"); then
        echo "onetool: the model server did not answer" >&2
        exit 1
    fi
    first=${reply%%$'\n'*}
    if [[ $first == "RUN "* ]]; then
        cmd=${first#RUN }
        echo "Running: $cmd"
        out=$(bash -c "$cmd" 2>&1)
        code=$?
        printf '%s\n' "$out"
        { echo "### assistant"; echo "RUN $cmd"; echo "### output (exit $code)"; printf '%s\n' "$out"; } >> "$conv"
        continue
    fi
    text=${reply#SAY}
    text=${text#$'\n'}
    text=${text%$'\n'}
    { echo "### assistant"; printf '%s\n' "$text"; } >> "$conv"
    last=${text##*$'\n'}
    if [[ $last == *"?" ]]; then
        [[ $text == *$'\n'* ]] && printf '%s\n' "${text%$'\n'*}"
        printf '%s ' "$last"
    else
        printf '%s\n> ' "$text"
    fi
    # One message: its first line, then whatever else arrives with it (a paste).
    IFS= read -r line || exit 0
    msg=$line
    while IFS= read -r -t 0.5 more; do
        msg+=$'\n'$more
    done
    { echo "### user"; printf '%s\n' "$msg"; } >> "$conv"
done
