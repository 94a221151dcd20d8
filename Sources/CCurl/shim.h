#ifndef PARLEY_CCURL_SHIM_H
#define PARLEY_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt / curl_easy_getinfo / curl_multi_setopt are variadic: one wrapper per argument type. */
static inline CURLcode parley_curl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode parley_curl_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode parley_curl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode parley_curl_easy_setopt_write_fn(CURL *h, CURLoption o, curl_write_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode parley_curl_easy_setopt_read_fn(CURL *h, CURLoption o, curl_read_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode parley_curl_easy_setopt_xferinfo_fn(CURL *h, CURLoption o, curl_xferinfo_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode parley_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode parley_curl_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode parley_curl_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode parley_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode parley_curl_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode parley_curl_multi_setopt_socket_fn(CURLM *m, curl_socket_callback v) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
static inline CURLMcode parley_curl_multi_setopt_timer_fn(CURLM *m, curl_multi_timer_callback v) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }
static inline unsigned int parley_curl_version_now(void) { return CURLVERSION_NOW; }
static inline CURLcode parley_curl_easy_setopt_opensocket(CURL *h, curl_opensocket_callback v, void *data) {
    CURLcode code = curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, v);
    return code == CURLE_OK ? curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, data) : code;
}

#endif
