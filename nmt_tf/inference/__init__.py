"""Text-to-text inference shared by evaluation, translation and export."""
