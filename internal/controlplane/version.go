package controlplane

// Version is set at link time (-ldflags "-X ...controlplane.Version=...").
var Version = "dev"
