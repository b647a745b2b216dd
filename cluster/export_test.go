package cluster

// PutSnapshot lets the external tests upload a database file the way the
// seed command does, without a node.
var PutSnapshot = putSnapshot

// ChunkBytes is the snapshot chunk size.
const ChunkBytes = chunkBytes
