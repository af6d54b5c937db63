#!/bin/sh
# A lock client program for the tests, in POSIX sh with redis-cli (docs/client-protocol.md):
# SET key owner PX ttl NX, retried until LOCKCHECK_WAIT_MS; released by
#   plain:   DEL key, no owner check (npm `redis-lock`'s release);
#   checked: a compare-and-delete script, answering "released" whatever it returned (as
#            `redis-semaphore` does: its release does not say whether its delete found the key).
# Either way the answer is only what the program says; what it deleted is the servers' to tell.
mode=$1
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
            if [ "$(cli SET "$LOCKCHECK_KEY" "$owner" PX "$LOCKCHECK_TTL_MS" NX)" = OK ]; then
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
            echo "DEL returned $(cli DEL "$LOCKCHECK_KEY")" >&2
        else
            cli EVAL "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end" 1 "$LOCKCHECK_KEY" "$owner" >/dev/null
        fi
        echo "{\"id\": $id, \"result\": \"released\"}"
        ;;
    *) echo "{\"id\": $id, \"result\": \"error\", \"message\": \"unknown op $op\"}" ;;
    esac
done
