import CCurl

/// Maps a failed transfer's CURLcode onto the engine's error codes. `detail` is the text
/// curl left in the transfer's error buffer, which names the host, port and cause.
func parleyError(forCurlCode code: CURLcode, detail: String) -> ParleyError {
    let summary = String(cString: curl_easy_strerror(code))
    var message = detail.isEmpty || detail == summary ? summary : "\(summary): \(detail)"
    message += " (curl \(code.rawValue))"
    return ParleyError(parleyErrorCode(forCurlCode: code), message)
}

func parleyErrorCode(forCurlCode code: CURLcode) -> ParleyErrorCode {
    switch code {
    case CURLE_OPERATION_TIMEDOUT:
        return .timeout
    case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
        CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
        CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_SHUTDOWN_FAILED,
        CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
        CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
        return .tls
    case CURLE_ABORTED_BY_CALLBACK:
        return .cancelled
    case CURLE_FILESIZE_EXCEEDED:
        return .limitExceeded
    case CURLE_OUT_OF_MEMORY:
        return .noMemory
    case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_FUNCTION_ARGUMENT:
        return .invalidArgument
    case CURLE_BAD_CONTENT_ENCODING:
        return .protocolViolation
    case CURLE_READ_ERROR:
        return .io
    default:
        // Resolve, connect, send/receive, reset, empty or partial replies, HTTP/2 framing,
        // proxy failures: all are "the network did not deliver".
        return .network
    }
}
