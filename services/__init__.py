"""The service layer: what the pages do, as plain functions a unit test can call (no Streamlit).

    db            the one database provider: one engine per URL per process, shared by every session
    assignments   create, load by code, verify a teacher key, worksheet PDFs
    submissions   a student's very exercises (stored once), blank detection, grading, storing answers
    gradebook     the students × items table, its CSV, the mistakes per item, regrading stored answers
    progress      practice attempts stored and read back, and what they add up to

Layering (DESIGN §2): attention_core ← exercises ← storage ← services ← ui / app_pages.
"""
