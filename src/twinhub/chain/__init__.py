"""Chain compatibility: ixo's public gRPC/REST wire contract (protos, descriptors)."""
