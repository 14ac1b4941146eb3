// The server itself lives in Sources/LoopbackHTTP (the demo serves its download with it);
// this test-support target adds the throwaway CA (`TestCertificates`) and the tests'
// tools (`Tool.run`: openssl, curl, sha256sum) and re-exports the server.
@_exported import LoopbackHTTP
