/*
 * The claim / takeover / complete / release protocol of idemgen's separate-claim strategy
 * (protocol.md, "States and transitions"), for one key and three attempts of the same request.
 *
 * Checked with spin for:
 *   - never two committed business writes for one key;
 *   - a completed record's stored result is the committed write's result;
 *   - every success (executed, reconciled after a lost acknowledgement, or replayed) answers
 *     with the committed write's result.
 *
 * Nondeterminism covers what the executor cannot control: any claim may go stale (the holder is
 * slow, paused or dead) and be taken over; a process may crash at any point after claiming
 * (its transaction rolls back, its claim stays behind); handlers fail or answer non-2xx; a
 * release may fail; a commit acknowledgement may be lost, and the read-back may run before or
 * after the commit lands.
 *
 * Two deliberately broken variants prove the checker bites (spin must find a double write):
 *   -DUNGUARDED  the completion is guarded by nothing (UPDATE ... WHERE key = $k);
 *   -DSPLIT      the business write commits in its own transaction and the record is completed
 *                afterwards, so a crash in between leaves a write behind a claim.
 * (A completion guarded by the state only, without the token, still never writes twice: the
 * record goes claimed -> completed once, atomically with its write. The token decides whose
 * write that is: a taken-over attempt's write never commits.)
 */

#define NONE      0
#define CLAIMED   1
#define COMPLETED 2

byte rec_state = NONE;   /* the idempotency record of the key */
byte rec_token = 0;      /* the token of the attempt holding (or having completed) it */
byte rec_result = 0;     /* the stored result: the id of the write that produced it */
byte writes = 0;         /* committed business writes for the key */
byte committed = 0;      /* the id of the committed write */

#ifdef UNGUARDED
#define MAY_COMPLETE true
#else
/* UPDATE ... SET state = 'completed' WHERE state = 'claimed' AND claim_token = $mine */
#define MAY_COMPLETE (rec_state == CLAIMED && rec_token == me)
#endif

inline invariant() {
    assert(writes <= 1);
    assert(rec_state != COMPLETED || (writes == 1 && rec_result == committed))
}

proctype Attempt(byte me) {
    byte answer = 0;

    /* 1. Claim: one short statement (INSERT ... ON CONFLICT DO NOTHING, read, or the takeover's
     *    compare-and-set on the old token). */
    atomic {
        if
        :: rec_state == NONE -> rec_state = CLAIMED; rec_token = me
        :: rec_state == COMPLETED -> answer = rec_result; goto replay
        :: rec_state == CLAIMED ->
            if
            :: rec_token = me      /* the claim is stale: take it over with my token */
            :: goto conflict       /* still fresh: 409 after the in-flight wait */
            fi
        fi
    }

    /* 2. The handler runs inside my transaction; its write is pending until commit. */
    if
    :: goto crash              /* the process dies: the transaction rolls back */
    :: goto failed             /* handler error or non-2xx */
    :: skip                    /* 2xx */
    fi;

    /* 3. Complete the record in the business transaction and commit. The completion's UPDATE
     *    holds the row lock until commit, so a concurrent takeover waits and then finds the
     *    record completed: complete + commit is one atomic step against claims. */
#ifdef SPLIT
    atomic { writes++; committed = me; assert(writes <= 1) }
    if
    :: goto crash
    :: skip
    fi;
    atomic {
        if
        :: MAY_COMPLETE -> rec_state = COMPLETED; rec_token = me; rec_result = me
        :: else -> goto taken_over
        fi
    }
#else
    atomic {
        if
        :: MAY_COMPLETE ->
            rec_state = COMPLETED; rec_token = me; rec_result = me;
            writes++; committed = me;
            invariant()
        :: else -> goto taken_over   /* guard failed: roll back, my write never commits */
        fi
    }
#endif

    /* 4. The acknowledgement arrives, or is lost. */
    if
    :: answer = me; goto success
    :: atomic {  /* lost: read the record back on the writer */
           if
           :: rec_state == COMPLETED && rec_token == me -> answer = me; goto success
           :: else -> goto unknown
           fi
       }
    :: goto unknown   /* lost, and the read-back failed too: 504 */
    fi;

success:
    assert(answer == committed && writes == 1);
    goto done;

replay:
    assert(answer == committed && writes == 1);
    goto done;

taken_over:
    /* Answer with the winner's stored result if it has one, else 409. */
    atomic {
        if
        :: rec_state == COMPLETED -> answer = rec_result; assert(answer == committed)
        :: else -> skip
        fi
    }
    goto done;

failed:
    /* Roll back, then release the claim, guarded by the token; a failed release leaves the claim
     * for stale takeover. */
    if
    :: atomic {
           if
           :: rec_state == CLAIMED && rec_token == me -> rec_state = NONE; rec_token = 0
           :: else -> skip
           fi
       }
    :: skip
    fi;
    goto done;

crash:
conflict:
unknown:
done:
    invariant()
}

init {
    atomic {
        run Attempt(1);
        run Attempt(2);
        run Attempt(3)
    }
    /* When every attempt has finished: a write exists exactly when the record is completed. */
    (_nr_pr == 1) ->
        invariant();
        assert((writes == 1) == (rec_state == COMPLETED))
}
