/* What the C examples share for their output: whole lines written under one lock (the
 * library's callback thread prints while the main thread does), and texts shortened at a
 * word boundary so that a line never ends mid-word. */
#ifndef PARLEY_EXAMPLE_OUTPUT_H
#define PARLEY_EXAMPLE_OUTPUT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t output_lock = PTHREAD_MUTEX_INITIALIZER;

/* Prints one line (a newline is added) to stream in one write, under the output lock. */
static void say(FILE *stream, const char *format, ...) {
    char line[1024];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(line, sizeof line - 1, format, arguments);
    va_end(arguments);
    strcat(line, "\n");
    pthread_mutex_lock(&output_lock);
    fputs(line, stream);
    fflush(stream);
    pthread_mutex_unlock(&output_lock);
}

/* text (may be NULL) cut to at most max bytes at a word boundary, "..." marking the cut;
 * written to out, which holds max + 4 bytes. */
static const char *shorten(const char *text, size_t max, char *out) {
    if (text == NULL) text = "";
    size_t length = strlen(text);
    if (length <= max) return strcpy(out, text);
    size_t cut = max;
    while (cut > max / 2 && text[cut] != ' ') cut--;
    if (text[cut] != ' ') {  /* one long word: cut it, but not inside a UTF-8 character */
        cut = max;
        while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
    }
    memcpy(out, text, cut);
    strcpy(out + cut, "...");
    return out;
}

#endif
