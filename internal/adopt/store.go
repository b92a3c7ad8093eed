package adopt

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
)

// storeLister is agent's driver when its sessions are rows in a store of
// its own (OpenCode's database) rather than files.
var storeLister = agents.DriverAs[agents.StoreLister]

// listing is a store's stamp at its last listing that left nothing to do,
// and when that listing began.
type listing struct {
	stamp string
	at    time.Time
}

// relistAfter bounds how long a store is not listed for an unchanged
// stamp: should a write ever leave the stamp as it was, it is seen this
// late, not never.
const relistAfter = 5 * time.Minute

// unsettledRelist bounds how often a store whose stamp cannot tell (one
// written again and again, as by a long turn of the user's own OpenCode)
// is listed. Each listing reads whole every session whose version moved
// (OpenCode's rows from its database: no CLI since 5e7498b, but a long
// session's rows each time), so listing at every scan would spend the
// node's CPU on reads that find one row more. Once the writes stop the
// stamp tells again and the next scan lists.
const unsettledRelist = 15 * time.Second

// scanStore follows every session in src's store: listed, and each one
// whose version moved read whole (the driver's Export), sending what it
// holds beyond the messages kept. A session is keyed in the bookkeeping by
// its store's path and its native id. A read is a whole session's rows and
// the node scans every few seconds, so the store is listed only when its
// stamp moved since a listing that left nothing to do, or relistAfter
// passed.
func (f *Follower) scanStore(ctx context.Context, src Source, sl agents.StoreLister) (int, error) {
	store := sl.StorePath(src.Home)
	// Taken before the listing: a write while it runs moves the next one.
	stamp, at := sl.StoreStamp(src.Home), f.now()
	if l, ok := f.listed[store]; ok && stamp != "" && stamp == l.stamp && at.Sub(l.at) < relistAfter {
		return 0, nil
	}
	if last, ok := f.lastListing[store]; ok && stamp == "" && at.Sub(last) < unsettledRelist {
		return 0, nil
	}
	delete(f.listed, store)
	f.lastListing[store] = at
	list, err := sl.StoredSessions(ctx, src.Bin, src.Env, src.Home)
	if err != nil {
		return 0, err
	}
	total, done := 0, true
	var errsSeen []error
	for _, s := range list {
		if ctx.Err() != nil {
			return total, ctx.Err()
		}
		key := store + "#" + s.ID
		n, err := f.try(src.Agent, key, func() (int, error) { return f.followStored(ctx, src, sl, key, s) })
		total += n
		if err != nil {
			errsSeen = append(errsSeen, err)
		}
		done = done && err == nil && f.upToDate(src, key, s)
	}
	if done && stamp != "" {
		f.listed[store] = listing{stamp: stamp, at: at}
	}
	return total, errors.Join(errsSeen...)
}

// upToDate says whether stored session s is kept at its listed version, or
// is cast's own: not one waiting for a CLI of cast's to end (Busy) or
// failing (f.failing), which the next scan must list to look at again.
func (f *Follower) upToDate(src Source, key string, s agents.StoredSession) bool {
	if f.failing[key] != nil {
		return false
	}
	if st := f.st.get(key); st != nil && st.Version == s.Version {
		return true
	}
	return f.cast.Runs(src.Agent, "", s.ID)
}

// followStored brings one stored session's new messages to the sink.
func (f *Follower) followStored(ctx context.Context, src Source, sl agents.StoreLister, key string, s agents.StoredSession) (int, error) {
	if f.cast.Runs(src.Agent, "", s.ID) {
		return 0, nil // cast's own
	}
	st := f.st.get(key)
	if st != nil && st.Version == s.Version {
		return 0, nil
	}
	if st == nil && f.cast.Busy(src.Agent) {
		return 0, nil // maybe cast's own turn's: looked at once it is over
	}
	msgs, err := sl.Export(ctx, src.Bin, src.Env, agents.Target{Home: src.Home, Cwd: s.Cwd}, s.ID)
	if err != nil {
		return 0, err
	}
	if st == nil {
		st = &fileState{Agent: src.Agent, NativeID: s.ID, Sent: map[string]int{}}
		if rec, ok := f.cast.Exported(src.Agent, s.ID); ok && rec.SessionID != "" {
			// cast wrote it (`cast export`, a restore): what it holds is that
			// cast session's already, and what the agent adds goes there.
			st.SessionID = rec.SessionID
			for _, m := range msgs {
				st.Sent[digest(m)]++
			}
			f.lg.Info("stored session written by cast: following it as its cast session",
				zap.String("agent", src.Agent), zap.String("native_id", s.ID), zap.String("session", rec.SessionID))
		}
	}
	o := origin{Key: key, Path: sl.StorePath(src.Home), Cwd: s.Cwd, ParentNativeID: s.ParentID}
	sent, err := f.send(ctx, src.Agent, o, st, unsent(st.Sent, map[string]int{}, msgs))
	if err != nil {
		return sent, err
	}
	st.Version = s.Version
	return sent, f.st.put(key, st)
}
