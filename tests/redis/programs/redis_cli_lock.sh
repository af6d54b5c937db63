#!/bin/sh
# A lock client program for the tests, in POSIX sh with redis-cli (docs/client-protocol.md):
# SET key owner PX ttl NX, retried until LOCKCHECK_WAIT_MS; released by
#   plain:   DEL key, no owner check (npm `redis-lock`'s release);
#   checked: a compare-and-delete script, answering "released" whatever it returned (as
#            `redis-semaphore` does: its release does not say whether its delete found the key).
# Either way the answer is only what the program says; what it deleted is the servers' to tell.
# An optional second argument is a prefix the "library" puts before the name it is given, as
# most Redis lock libraries do (`lock:<name>`): the witness must learn the key from its commands.
mode=$1
key="${2:-}$LOCKCHECK_KEY"
url=${LOCKCHECK_REDIS_URLS%%,*}
cli() { redis-cli -u "$url" "$@"; }
n=0
while read -r line; do
    id=$(printf '%s' "$line" | sed 's/.*"id": *\([0-9]*\).*/\1/')
    op=$(printf '%s' "$line" | sed 's/.*"op": *"\([a-z]*\)".*/\1/')
    case $op in
    hello) echo "{\"id\": $id, \"result\": \"ready\"}" ;;
    acquire)
        n=$((n + 1))
        owner="$LOCKCHECK_CLIENT_ID-$$-$n"
        deadline=$(($(date +%s%3N) + LOCKCHECK_WAIT_MS))
        result=failed
        while [ "$(date +%s%3N)" -lt "$deadline" ]; do
            if [ "$(cli SET "$key" "$owner" PX "$LOCKCHECK_TTL_MS" NX)" = OK ]; then
                result=acquired
                break
            fi
            sleep 0.01
        done
        if [ $result = acquired ]; then
            echo "{\"id\": $id, \"result\": \"acquired\", \"owner\": \"$owner\"}"
        else
            echo "{\"id\": $id, \"result\": \"failed\"}"
        fi
        ;;
    release)
        if [ "$mode" = plain ]; then
            echo "DEL returned $(cli DEL "$key")" >&2
        else
            cli EVAL "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end" 1 "$key" "$owner" >/dev/null
        fi
        echo "{\"id\": $id, \"result\": \"released\"}"
        ;;
    *) echo "{\"id\": $id, \"result\": \"error\", \"message\": \"unknown op $op\"}" ;;
    esac
done
