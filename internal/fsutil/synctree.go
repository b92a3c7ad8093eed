package fsutil

// SyncTree makes everything under root durable, as a tree written by
// another program (git) that does not sync it, and root's own entry in
// its parent. Without it a power loss after a later synced write (a done
// marker) can keep that write and lose part of the tree.
func SyncTree(root string) error { return syncTree(root) }
