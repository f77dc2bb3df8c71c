"""The switch: the one P4Runtime client; nothing else imports grpc or the P4Runtime protos."""
